-- Sessions added with infer=False: logged and indexed as episodes, but kept out of
-- the queue until someone asks for them to be processed (process_pending, a job
-- retry). A deferred session is a pending row with `deferred` set; the store reports
-- its status as "deferred".
ALTER TABLE sessions ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
