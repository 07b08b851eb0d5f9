"""Screens drawn, not read: the vocabulary, composer and examples the simulator and the
tests draw agent screens with. `fleetd serve` never imports them."""
