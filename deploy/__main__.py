from deploy.cli import main

main(prog_name="python -m deploy")
