from logstore_cli.cli.app import main

main()
