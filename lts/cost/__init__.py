"""cost: the roofline cost model: op tables, the walk over a layer, collectives, ``evaluate``."""
