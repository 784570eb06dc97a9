package chart

import "math"

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
