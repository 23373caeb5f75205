from deltamem.cli.main import app

app(prog_name="deltamem")
