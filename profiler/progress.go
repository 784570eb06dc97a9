package profiler

import "time"

// progressReporter turns the run's steps into Progress reports with an
// elapsed time and an estimate of the time left.
type progressReporter struct {
	fn       func(Progress)
	start    time.Time
	perPoint time.Duration // PointDuration: the estimate until a point has run

	last       Progress
	pointBegan time.Time
	sweepTime  time.Duration // time spent on measured points
	measured   int
}

func (p *progressReporter) send(pr Progress) {
	pr.Elapsed = time.Since(p.start)
	per := p.perPoint
	if p.measured > 0 {
		per = p.sweepTime / time.Duration(p.measured)
	}
	pr.ETA = time.Duration(max(pr.Points-pr.Point, 0)) * per
	p.last = pr
	if p.fn != nil {
		p.fn(pr)
	}
}

// say reports a message without changing the counts.
func (p *progressReporter) say(msg string) {
	p.send(Progress{Point: p.last.Point, Points: p.last.Points, Message: msg})
}

// point reports a point about to start (cpus 0) or just measured.
func (p *progressReporter) point(point, points, cpus int, tput float64, msg string) {
	if cpus == 0 {
		p.pointBegan = time.Now()
	} else {
		p.sweepTime += time.Since(p.pointBegan)
		p.measured++
	}
	p.send(Progress{Point: point, Points: points, CPUs: cpus, Throughput: tput, Message: msg})
}

// done reports the end of the run.
func (p *progressReporter) done(points int, msg string) {
	p.send(Progress{Point: points, Points: points, Message: msg})
}
