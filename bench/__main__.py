from bench.cli import main

main(prog_name="python -m bench")
