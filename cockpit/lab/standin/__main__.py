from cockpit.lab.standin.server import main

main()
