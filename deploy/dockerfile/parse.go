// Package dockerfile reads the project's Dockerfile into its stages and instructions, for the tests that keep
// it honest and for the test cluster, which builds the image its final stage describes.
package dockerfile

import (
	"fmt"
	"strings"
)

// Instruction is one logical line: its command (upper case) and the rest, continuations joined.
type Instruction struct {
	Cmd, Args string
}

// Stage is a FROM and the instructions under it.
type Stage struct {
	Base, Name   string
	Instructions []Instruction
}

// Parse splits text into stages. Comments and blank lines go; a line ending in a backslash continues on the
// next. Only ARG may precede the first FROM.
func Parse(text string) ([]Stage, error) {
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	var stages []Stage
	for _, l := range logical {
		cmd, args, _ := strings.Cut(l, " ")
		in := Instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			if len(f) == 0 {
				return nil, fmt.Errorf("dockerfile: FROM without an image")
			}
			st := Stage{Base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd != "ARG" {
				return nil, fmt.Errorf("dockerfile: %s before the first FROM", in.Cmd)
			}
			continue
		}
		stages[len(stages)-1].Instructions = append(stages[len(stages)-1].Instructions, in)
	}
	return stages, nil
}
