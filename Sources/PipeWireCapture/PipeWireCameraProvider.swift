import CPipeWire
