package ec2client

import (
	"maps"
	"slices"
)

// Codes lists every code the vocabulary tells apart, so that its test covers each one.
func Codes() []string { return slices.Sorted(maps.Keys(vocabulary)) }
