package wire

import (
	"encoding/binary"
	"fmt"
)

// Limits bound what one msgpack value may cost to decode. The codec skips
// a field it does not know by recursing once per nesting level, with no
// depth limit of its own (ugorji/go/codec v1.3.2 applies MaxDepth only to
// values it decodes), so a megabyte of 0x91 bytes under an unknown key
// would take a megabyte of stack frames. Check walks the bytes first,
// iteratively, and refuses such a value before the codec sees it.
type Limits struct {
	// MaxBytes bounds the encoded value.
	MaxBytes int
	// MaxDepth bounds nesting: a scalar at the top is depth 0, the
	// elements of a top-level map are depth 1.
	MaxDepth int
	// MaxLen bounds one array's or map's element count.
	MaxLen int
	// MaxItems bounds the elements of all arrays and maps together (a map
	// entry counts two: key and value). With MaxLen it bounds what the
	// decoded value can take in memory: an element of one byte decodes to
	// at most a struct of a few dozen bytes.
	MaxItems int
}

// DefaultLimits fit every message of this protocol and every spooled
// record with room to spare: a report nests four levels (record, matrix,
// rows, numbers), a sweep has at most MaxSweepLen points of four fields.
var DefaultLimits = Limits{
	MaxBytes: MaxBodyBytes,
	MaxDepth: 16,
	MaxLen:   8192,
	MaxItems: 1 << 17,
}

// Check verifies that b holds exactly one msgpack value within lim. It
// allocates nothing in proportion to the input and never recurses.
// Failures wrap ErrBody and, for the limits, ErrTooDeep or ErrTooMany.
func Check(b []byte, lim Limits) error {
	if len(b) > lim.MaxBytes {
		return fmt.Errorf("%w: %w: %d bytes, limit %d", ErrBody, ErrTooMany, len(b), lim.MaxBytes)
	}
	// open holds, for each enclosing container, how many values it still
	// owes; pending is the same for the innermost one. The stack is at
	// most MaxDepth long.
	var open []int
	pending, items, i := 1, 0, 0
	for {
		for pending == 0 {
			if len(open) == 0 {
				if i != len(b) {
					return fmt.Errorf("%w: %d bytes after the value", ErrBody, len(b)-i)
				}
				return nil
			}
			pending, open = open[len(open)-1], open[:len(open)-1]
		}
		if i >= len(b) {
			return fmt.Errorf("%w: ends inside a value at byte %d", ErrBody, i)
		}
		pending--
		start := i
		skip, n, isMap, err := valueHeader(b[i:])
		if err != nil {
			return fmt.Errorf("%w: at byte %d: %v", ErrBody, i, err)
		}
		if uint64(skip) > uint64(len(b)-i) {
			return fmt.Errorf("%w: value at byte %d claims %d bytes, %d remain", ErrBody, i, skip, len(b)-i)
		}
		i += int(skip)
		if n < 0 {
			continue // a scalar
		}
		count := n
		if isMap {
			count = 2 * n // keys and values
		}
		if n > int64(lim.MaxLen) {
			return fmt.Errorf("%w: %w: container of %d elements at byte %d, limit %d", ErrBody, ErrTooMany, n, start, lim.MaxLen)
		}
		// Every element takes at least one byte: a claim beyond the
		// remaining bytes is a lie, refused before it costs anything.
		if count > int64(len(b)-i) {
			return fmt.Errorf("%w: container of %d elements at byte %d, %d bytes remain", ErrBody, n, start, len(b)-i)
		}
		if items += int(count); items > lim.MaxItems {
			return fmt.Errorf("%w: %w: more than %d elements in all", ErrBody, ErrTooMany, lim.MaxItems)
		}
		if count == 0 {
			continue
		}
		if len(open)+1 > lim.MaxDepth {
			return fmt.Errorf("%w: %w: more than %d levels at byte %d", ErrBody, ErrTooDeep, lim.MaxDepth, start)
		}
		open = append(open, pending)
		pending = int(count)
	}
}

// valueHeader reads the value starting at b[0]. For a scalar it returns
// the value's whole size and n = -1; for an array or map, the size of its
// header and its element count n (entries for a map). b is not empty.
func valueHeader(b []byte) (size uint64, n int64, isMap bool, err error) {
	need := func(k int) bool { return len(b) >= 1+k }
	be := func(k int) uint64 {
		switch k {
		case 1:
			return uint64(b[1])
		case 2:
			return uint64(binary.BigEndian.Uint16(b[1:3]))
		}
		return uint64(binary.BigEndian.Uint32(b[1:5]))
	}
	c := b[0]
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return 1, -1, false, nil
	case c&0xf0 == 0x80:
		return 1, int64(c & 0x0f), true, nil
	case c&0xf0 == 0x90:
		return 1, int64(c & 0x0f), false, nil
	case c&0xe0 == 0xa0:
		return 1 + uint64(c&0x1f), -1, false, nil
	}
	// Fixed-size scalars: header byte plus payload.
	switch c {
	case 0xcc, 0xd0:
		return 2, -1, false, nil
	case 0xcd, 0xd1:
		return 3, -1, false, nil
	case 0xca, 0xce, 0xd2:
		return 5, -1, false, nil
	case 0xcb, 0xcf, 0xd3:
		return 9, -1, false, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16 plus a type byte
		return 2 + 1<<(c-0xd4), -1, false, nil
	}
	// Length-prefixed: k bytes of length, then for ext a type byte.
	var k int
	var ext, container bool
	switch c {
	case 0xc4, 0xd9:
		k = 1
	case 0xc5, 0xda:
		k = 2
	case 0xc6, 0xdb:
		k = 4
	case 0xc7:
		k, ext = 1, true
	case 0xc8:
		k, ext = 2, true
	case 0xc9:
		k, ext = 4, true
	case 0xdc:
		k, container = 2, true
	case 0xdd:
		k, container = 4, true
	case 0xde:
		k, container, isMap = 2, true, true
	case 0xdf:
		k, container, isMap = 4, true, true
	default: // 0xc1, never used
		return 0, 0, false, fmt.Errorf("reserved byte %#02x", c)
	}
	if !need(k) {
		return 0, 0, false, fmt.Errorf("length of %#02x cut short", c)
	}
	l := be(k)
	switch {
	case container:
		return 1 + uint64(k), int64(l), isMap, nil
	case ext:
		return 2 + uint64(k) + l, -1, false, nil
	}
	return 1 + uint64(k) + l, -1, false, nil
}
