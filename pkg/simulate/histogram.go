package simulate

import (
	"math"
	"sync/atomic"
	"time"
)

// Buckets of the latency histogram: logarithmic, about 1.5% wide, from 1µs
// to over an hour, so that memory stays fixed however long the run.
const (
	histGrowth  = 1.015
	histBuckets = 1500
)

var histLogGrowth = math.Log(histGrowth)

// histogram counts latencies in fixed logarithmic buckets. It is safe for
// concurrent use without locks.
type histogram struct {
	counts [histBuckets]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64 // nanoseconds
}

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(int(math.Log(us)/histLogGrowth)+1, histBuckets-1)
}

// bucketValue is the middle of bucket b (geometrically).
func bucketValue(b int) time.Duration {
	if b == 0 {
		return time.Microsecond
	}
	us := math.Exp((float64(b) - 0.5) * histLogGrowth)
	return time.Duration(us * float64(time.Microsecond))
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(d)].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile is the latency below which a fraction q of the samples fall,
// within a bucket's width; 0 when there is no sample.
func (h *histogram) quantile(q float64) time.Duration {
	total := h.total.Load()
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	if rank == total {
		return h.maxValue()
	}
	var seen int64
	for b := range h.counts {
		seen += h.counts[b].Load()
		if seen >= rank {
			return min(bucketValue(b), h.maxValue())
		}
	}
	return h.maxValue()
}

func (h *histogram) maxValue() time.Duration { return time.Duration(h.max.Load()) }
