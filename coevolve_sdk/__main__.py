from coevolve_sdk.cli.main import main

main()
