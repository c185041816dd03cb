from build_engines.cli import main

main(prog_name="python -m build_engines")
