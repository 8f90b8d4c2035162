package sgpool

import (
	"strings"

	"github.com/eniwire/eniwire/controller/journal"
)

// Key is a set's name (journal.GroupSetKey).
func Key(groups []string) string { return journal.GroupSetKey(groups) }

// Normalize returns the groups as Key orders them: sorted, without repeats or empty ids.
func Normalize(groups []string) []string { return Groups(Key(groups)) }

// Groups returns the group ids of a set's key.
func Groups(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ",")
}
