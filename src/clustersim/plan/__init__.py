"""Planning: candidate layouts as arrays, feasibility masks, and the searches over them (fastest, top-k, Pareto)."""
