package trace

import "math/bits"

// pyRandom is a Mersenne Twister (MT19937, Matsumoto and Nishimura 1998)
// that draws as CPython's random module does, so that a job list drawn by
// a Python simulator seeded with random.seed(n) can be drawn again here,
// value for value. Only what the Synergy simulator's generator calls is
// here: seeding with a non-negative integer, random(), uniform(),
// randint() and the 32-bit outputs under them.
type pyRandom struct {
	mt  [mtN]uint32
	idx int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// newPyRandom is random.seed(seed) for a non-negative integer seed: the
// generator is seeded by MT19937's init_by_array with the seed's 32-bit
// words, least significant first (one word, 0, for seed 0).
func newPyRandom(seed uint64) *pyRandom {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

// initGenrand is MT19937's init_genrand.
func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = mtN
}

// initByArray is MT19937's init_by_array.
func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 is MT19937's genrand_int32: the next 32-bit output.
func (r *pyRandom) Uint32() uint32 {
	if r.idx >= mtN {
		for kk := 0; kk < mtN; kk++ {
			y := (r.mt[kk] & mtUpperMask) | (r.mt[(kk+1)%mtN] & mtLowerMask)
			v := r.mt[(kk+mtM)%mtN] ^ (y >> 1)
			if y&1 != 0 {
				v ^= mtMatrixA
			}
			r.mt[kk] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// Random is random.random(): 53 random bits from two outputs (27 and 26
// bits), uniform in [0, 1).
func (r *pyRandom) Random() float64 {
	a, b := r.Uint32()>>5, r.Uint32()>>6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// Uniform is random.uniform(a, b): a + (b-a)*random().
func (r *pyRandom) Uniform(a, b float64) float64 {
	return a + (b-a)*r.Random()
}

// RandInt is random.randint(lo, hi) for a span below 2^32: CPython draws
// as many bits as the span needs from one output each time and rejects
// values past the span, so a call takes one output or more.
func (r *pyRandom) RandInt(lo, hi int) int {
	n := uint32(hi - lo + 1)
	k := bits.Len32(n)
	for {
		if v := r.Uint32() >> (32 - k); v < n {
			return lo + int(v)
		}
	}
}
