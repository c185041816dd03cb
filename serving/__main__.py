from serving.cli import main

main(prog_name="python -m serving")
