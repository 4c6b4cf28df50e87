from cockpit.command import console

console()
