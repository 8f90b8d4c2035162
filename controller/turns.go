package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/eniwire/eniwire/controller/api"
)

// errSuperseded is what an ADD (or a datapath repair) answers when a DEL of its attachment came while it was
// in flight: the DEL wins, and releases what the ADD took.
var errSuperseded = errors.New("a DEL of the container came while the ADD was in flight")

// attachmentTurns puts the requests for one attachment in line: an ADD, the runtime's retries of it and its
// DEL run one at a time, in the order they came, so a retry never answers with an IP its failing first
// attempt is about to give back, and a late ADD never sets up the datapath of an IP its DEL released. A DEL
// supersedes the ADDs ahead of it in line: their contexts end, and they fail once their step in flight is
// done. Who may touch it: any goroutine.
type attachmentTurns struct {
	mu    sync.Mutex
	lines map[api.Attachment][]*turn
}

// turn is one request's place in its attachment's line.
type turn struct {
	add        bool
	done       chan struct{}
	cancel     context.CancelFunc
	superseded atomic.Bool
}

// take queues a request for att (an ADD when add) and returns when every request ahead of it has finished,
// with a context that a later DEL ends when add. The caller calls finish when its request is done. A
// request whose ctx ends while it waits leaves the line (its place is released when the request ahead of it
// finishes) and gets ctx's error, or errSuperseded.
func (l *attachmentTurns) take(ctx context.Context, att api.Attachment, add bool) (*turn, context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &turn{add: add, done: make(chan struct{}), cancel: cancel}
	l.mu.Lock()
	if l.lines == nil {
		l.lines = map[api.Attachment][]*turn{}
	}
	line := l.lines[att]
	var ahead chan struct{}
	if len(line) > 0 {
		ahead = line[len(line)-1].done
	}
	if !add {
		for _, o := range line {
			if o.add {
				o.superseded.Store(true)
				o.cancel()
			}
		}
	}
	l.lines[att] = append(line, t)
	l.mu.Unlock()
	if ahead != nil {
		select {
		case <-ahead:
		case <-ctx.Done():
			go func() { <-ahead; l.finish(att, t) }()
			if t.superseded.Load() {
				return nil, nil, errSuperseded
			}
			return nil, nil, ctx.Err()
		}
	}
	return t, ctx, nil
}

// finish ends t's turn: the next request for att goes.
func (l *attachmentTurns) finish(att api.Attachment, t *turn) {
	l.mu.Lock()
	line := l.lines[att]
	for i, o := range line {
		if o == t {
			line = append(line[:i:i], line[i+1:]...)
			break
		}
	}
	if len(line) == 0 {
		delete(l.lines, att)
	} else {
		l.lines[att] = line
	}
	l.mu.Unlock()
	t.cancel()
	close(t.done)
}
