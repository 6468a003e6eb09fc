"""Write-side services: the only code that creates and changes audit rows."""
