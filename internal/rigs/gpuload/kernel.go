package gpuload

import _ "embed"

// SpinPTX is the spin kernel's PTX, written by hand (spin.ptx).
//
//go:embed spin.ptx
var SpinPTX string

// SpinKernel is the entry point SpinPTX defines: lachesis_spin(out, iters).
const SpinKernel = "lachesis_spin"

// spinBlock is the threads per block of a spin launch: with two blocks per
// multiprocessor (GridFor), 16 warps per SM keep its FMA pipes issuing
// whatever the architecture, and every block is resident at once, so a
// kernel's length is one block's.
const spinBlock = 256

// GridFor is the blocks of a spin launch on a GPU of sms multiprocessors.
func GridFor(sms int) uint32 {
	if sms < 1 {
		sms = 1
	}
	return uint32(2 * sms)
}
