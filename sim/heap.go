package sim

// completion is a run's scheduled end; seq tells a stale one (the run was
// preempted) from the current one.
type completion struct {
	at  float64
	job *JobState
	seq uint32
}

func (a completion) before(b completion) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.job.Job.ID < b.job.Job.ID
}

// completions is a binary min-heap, written out rather than via
// container/heap so pushes and pops do not box values in interfaces.
type completions []completion

func (h *completions) push(c completion) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *completions) pop() completion {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = completion{}
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].before(s[m]) {
			m = l
		}
		if r < len(s) && s[r].before(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
