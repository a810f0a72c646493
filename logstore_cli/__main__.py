from logstore_cli.cli.entry import main

main()
