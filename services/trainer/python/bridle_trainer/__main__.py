from .worker import main

main()
