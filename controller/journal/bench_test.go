package journal

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func percentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Nanoseconds()), "p99-ns")
}

// BenchmarkSave measures one durable save of a node's state holding n assignments, where each save is what a
// pod churn makes: one assignment added, or one released into cooldown. It reports p50, p99 and the bytes
// written per save.
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{10, 500} {
		b.Run(fmt.Sprintf("assignments=%d", n), func(b *testing.B) {
			s, _, err := Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := sample(n)
			if err := s.Save(st); err != nil {
				b.Fatal(err)
			}
			start := s.size
			var d []time.Duration
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					st.Assignments = append(st.Assignments, Assignment{ContainerID: fmt.Sprintf("bench-%d", i), IfName: "eth0", IP: "10.0.9.9", ENI: "eni-1"})
				} else {
					last := st.Assignments[len(st.Assignments)-1]
					st.Assignments = st.Assignments[:len(st.Assignments)-1]
					st.Cooldowns = append(st.Cooldowns[:0], Cooldown{IP: last.IP, ENI: last.ENI, Until: time.Unix(int64(i), 0)})
				}
				i++
				t0 := time.Now()
				if err := s.Save(st); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			percentiles(b, d)
			if s.gen == 1 {
				b.ReportMetric(float64(s.size-start)/float64(i), "bytes/save")
			}
		})
	}
}

// BenchmarkSaveParallel measures durable saves from 8 goroutines at once: group commit lets them share
// fsyncs. It reports fsyncs per save.
func BenchmarkSaveParallel(b *testing.B) {
	s, _, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st := sample(100)
	var mu sync.Mutex
	var d []time.Duration
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			t0 := time.Now()
			mu.Lock()
			st.Cooldowns = append(st.Cooldowns[:0], Cooldown{IP: "10.0.0.9", ENI: "eni-1", Until: time.Unix(int64(i), 0)})
			i++
			seq, err := s.Append(st)
			mu.Unlock()
			if err == nil {
				err = s.Commit(seq, Durable)
			}
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			d = append(d, time.Since(t0))
			mu.Unlock()
		}
	})
	percentiles(b, d)
	b.ReportMetric(float64(s.syncs.Load())/float64(len(d)), "fsyncs/save")
}
