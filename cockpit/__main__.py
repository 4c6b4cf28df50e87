from cockpit.cli import console

console()
