"""The demo's pieces: `fleetd demo` (show), its webhook and Alertmanager legs, and the
local receiver it and the tests post to. Nothing here runs in `fleetd serve`."""
