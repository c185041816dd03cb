from client.cli import main

main(prog_name="python -m client")
