"""A scripted model for `deltamem synth`: it reads each synthesis prompt and
answers it correctly for one made-up person (Ada Byron), deterministically from
the prompt alone, so that interrupted and whole runs write the same data. A test
makes a step go wrong by queueing a mutator in `bad[step]`: the next reply of
that step is the good one passed through it."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

from deltamem.llm.base import LLM, ChatMessage, Completion

Mutator = Callable[[dict[str, Any]], Any]

START = dt.date(2027, 3, 1)
CAREER = "Ada Byron works as a data analyst at Northwind Bank in Leeds."
SENIOR = "Ada Byron works as a senior data analyst at Northwind Bank in Leeds."
ASTHMA = "Ada Byron has mild asthma and carries an inhaler when running."
SISTER = "Ada Byron's sister Clara teaches piano in York."
PROFILE = {
    "profile": {
        "name": "Ada Byron",
        "gender": "female",
        "age": 36,
        "location": "Leeds",
        "occupation": "data analyst",
        "education": "MSc in statistics",
        "personality": "curious and careful",
        "summary": "Ada analyses data for a bank. She runs to clear her head.",
    },
    "start_date": START.isoformat(),
    "facts": [
        {
            "area": "career",
            "content": CAREER,
            "keywords": ["data analyst", "Northwind Bank", "Leeds"],
        },
        {"area": "health", "content": ASTHMA, "keywords": ["asthma", "inhaler", "running"]},
        {"area": "relationship", "content": SISTER, "keywords": ["Clara", "piano", "York"]},
    ],
}
HOBBIES = [
    ("pottery", "Clayworks studio"),
    ("chess", "Kirkgate club"),
    ("bouldering", "Depot gym"),
    ("salsa", "Corn Exchange"),
    ("birdwatching", "Fairburn reserve"),
    ("baking", "Headrow market"),
    ("rowing", "Aire boathouse"),
    ("choir", "Minster hall"),
]
CITIES = ["Paris", "Berlin", "Lisbon", "Oslo", "Vienna", "Prague", "Dublin", "Madrid"]
ANCHOR_1 = "Ada Byron felt unsure about her new routine at first."
ANCHOR_2 = "Ada Byron first felt unsure about her new routine but now sees it as a turning point."


def hobby(date: dt.date) -> tuple[str, str]:
    return HOBBIES[((date - START).days // 30) % len(HOBBIES)]


def took_up(date: dt.date) -> str:
    h, place = hobby(date)
    return f"Ada Byron took up {h} at {place}."


def _block(text: str, head: str) -> list[str]:
    """The `- ` lines right after the line containing `head`."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if head in line) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("- "):
            break
        out.append(line[2:])
    return out


def _date(text: str, pattern: str) -> dt.date:
    m = re.search(pattern, text)
    assert m, pattern
    return dt.date.fromisoformat(m.group(1))


class SynthWorld(LLM):
    name = "synth-world"

    def __init__(self, *, fail_after: int | None = None) -> None:
        super().__init__(timeout=5.0, retries=0)
        self.bad: dict[str, list[Mutator]] = {}
        self.calls: list[str] = []  # the step of every request
        self.prompts: list[str] = []
        self.fail_after = fail_after  # raise (a crash) on this many-th call

    @staticmethod
    def step_of(prompt: str) -> str:
        first = prompt.split("\n", 1)[0]
        for start, step in (
            ("Make up one person", "profile"),
            ("Continue ", "events"),
            ("People carry", "anchor"),
            ("A memory system keeps", "ops"),
            ("Write a conversation", "dialogue"),
            ("Write one exchange", "turn"),
        ):
            if first.startswith(start):
                return step
        assert "questions" in first, first
        return "questions"

    def _chat(self, messages: list[ChatMessage], **_: Any) -> Completion:
        prompt = messages[-1]["content"]
        step = self.step_of(prompt)
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("the machine went down")
        self.calls.append(step)
        self.prompts.append(prompt)
        reply: Any = getattr(self, step)(prompt)
        if self.bad.get(step):
            reply = self.bad[step].pop(0)(reply)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Completion(text=text, prompt_tokens=len(prompt) // 4, completion_tokens=10)

    # --- good answers ---------------------------------------------------------------------
    def profile(self, prompt: str) -> dict[str, Any]:
        return json.loads(json.dumps(PROFILE))

    def events(self, prompt: str) -> dict[str, Any]:
        m = re.search(r"write the next (\d+) events", prompt)
        assert m
        count = int(m.group(1))
        after = _date(prompt, r"all after (\d{4}-\d{2}-\d{2})")
        state = _block(prompt, "(one fact a line)")
        events = []
        promoted = False
        for k in range(1, count + 1):
            date = after + dt.timedelta(days=30 * k)
            if CAREER in state and not promoted:
                promoted = True
                change = {"area": "career", "change": "adjust", "before": CAREER, "after": SENIOR}
            else:
                change = {"area": "preference", "change": "new", "after": took_up(date)}
            events.append(
                {
                    "date": date.isoformat(),
                    "title": f"Week of {date:%d %B}",
                    "narrative": "Ada had a full week at work and tried something new.",
                    "changes": [change],
                }
            )
        return {"events": events}

    def anchor(self, prompt: str) -> dict[str, Any]:
        return {
            "method": "meaning",
            "thread": [
                {"event": 1, "memory": ANCHOR_1, "keywords": ["unsure", "new routine"]},
                {"event": 2, "memory": ANCHOR_2, "keywords": ["unsure", "turning point"]},
            ],
        }

    def ops(self, prompt: str) -> dict[str, Any]:
        date = _date(prompt, r"The event, on (\d{4}-\d{2}-\d{2})")
        state = _block(prompt, "The memory now")
        ops: list[dict[str, Any]] = []
        for line in _block(prompt, "Planned changes:"):
            m = re.match(r"(\w+), (\w+): (.*)$", line)
            assert m, line
            _, kind, rest = m.groups()
            if kind == "new":
                h, place = hobby(date)
                ops.append(
                    {
                        "op": "add",
                        "type": "persona",
                        "memory": rest,
                        "replaces": "",
                        "keywords": [h, place],
                    }
                )
            else:
                before, after = (ast.literal_eval(x) for x in rest.split(" becomes "))
                ops.append(
                    {
                        "op": "update",
                        "type": "persona",
                        "memory": after,
                        "replaces": before,
                        "keywords": ["senior", "Northwind Bank"],
                    }
                )
        h, _ = hobby(date)
        ops.append(
            {
                "op": "add",
                "type": "event",
                "memory": f"Ada Byron felt calmer after a {h} evening.",
                "replaces": "",
                "keywords": ["calmer", f"{h} evening"],
            }
        )
        if ASTHMA in state:
            ops.append(
                {
                    "op": "none",
                    "type": "persona",
                    "memory": ASTHMA,
                    "replaces": "",
                    "keywords": ["asthma", "inhaler"],
                }
            )
        city = CITIES[((date - START).days // 30) % len(CITIES)]
        distractors = [
            {
                "memory": f"Ada Byron is training for the {city} marathon.",
                "keywords": [city, "marathon"],
            }
        ]
        return {"operations": ops, "distractors": distractors}

    def dialogue(self, prompt: str) -> dict[str, Any]:
        m = re.search(r"(\d+) to (\d+) turns long", prompt)
        assert m
        n = int(m.group(1))
        facts = re.findall(r"^(F\d+): (.*?) \[", prompt, re.M)
        dists = re.findall(r"^(D\d+): (.*?) \[", prompt, re.M)
        said: list[list[str]] = [[] for _ in range(n)]
        asides: list[list[str]] = [[] for _ in range(n)]
        placed, dplaced = [], []
        for j, (fid, text) in enumerate(facts):
            said[j % n].append(text)
            placed.append({"id": fid, "turn": j % n + 1})
        for j, (did, text) in enumerate(dists):
            t = (j + 1) % n
            asides[t].append(f"Maybe {text.replace('Ada Byron', 'you')}?")
            dplaced.append({"id": did, "turn": t + 1})
        turns = [
            {
                "user": " ".join(said[t]) or "Nothing much else today.",
                "assistant": " ".join(["Thank you for telling me.", *asides[t]]),
            }
            for t in range(n)
        ]
        return {"turns": turns, "facts": placed, "distractors": dplaced}

    def turn(self, prompt: str) -> dict[str, Any]:
        m = re.search(r"In this message \w+ tells the assistant: (.*)$", prompt, re.M)
        assert m
        aside = re.search(r"guesses something that is NOT true: (.*?) It uses", prompt)
        reply = "Thank you for telling me."
        if aside:
            reply += f" Maybe {aside.group(1).replace('Ada Byron', 'you')}?"
        return {"user": f"Ada: I want you to know this. {m.group(1)}", "assistant": reply}

    def questions(self, prompt: str) -> dict[str, Any]:
        memories = [m.removeprefix("(earlier) ") for m in _block(prompt, "Memories (")]
        return {
            "questions": [
                {
                    "type": "Basic Fact Recall",
                    "question": "What does Ada do?",
                    "answer": "She is a data analyst.",
                    "difficulty": "easy",
                    "evidence": [memories[0]],
                },
                {
                    "type": "Memory Boundary",
                    "question": "What is Ada's middle name?",
                    "answer": "Not known.",
                    "difficulty": "easy",
                    "evidence": [],
                },
            ]
        }
