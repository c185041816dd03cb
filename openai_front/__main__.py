from openai_front.cli import main

main(prog_name="python -m openai_front")
