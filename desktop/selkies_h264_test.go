package desktop

import (
	"image/color"
	"testing"
)

// pcmH264 is a tiny H.264 encoder for tests, where no real one can be
// installed: Baseline profile, every macroblock of an IDR picture sent
// raw (I_PCM, the standard's lossless macroblock), and P pictures whose
// every macroblock is skipped (the picture stays). It makes Annex B
// access units of a w×h screen (multiples of 16) of one colour: the
// first a keyframe (SPS, PPS, IDR), then n-1 P pictures. Any conforming
// decoder — WebCodecs' included — shows the colour exactly.
func pcmH264(w, h int, c color.RGBA, n int) [][]byte {
	mbs := (w / 16) * (h / 16)
	// BT.601, limited range.
	r, g, b := float64(c.R), float64(c.G), float64(c.B)
	y := byte(16 + (65.481*r+128.553*g+24.966*b)/255 + 0.5)
	cb := byte(128 + (-37.797*r-74.203*g+112*b)/255 + 0.5)
	cr := byte(128 + (112*r-93.786*g-18.214*b)/255 + 0.5)

	var sps bitWriter
	sps.bits(66, 8)   // profile_idc: Baseline
	sps.bits(0xc0, 8) // constraint_set0 and 1
	sps.bits(30, 8)   // level_idc 3.0
	sps.ue(0)         // seq_parameter_set_id
	sps.ue(0)         // log2_max_frame_num_minus4: frame_num is 4 bits
	sps.ue(2)         // pic_order_cnt_type 2: order is decoding order
	sps.ue(1)         // max_num_ref_frames
	sps.bits(0, 1)    // gaps_in_frame_num_value_allowed_flag
	sps.ue(uint(w/16 - 1))
	sps.ue(uint(h/16 - 1))
	sps.bits(1, 1) // frame_mbs_only_flag
	sps.bits(1, 1) // direct_8x8_inference_flag
	sps.bits(0, 1) // frame_cropping_flag
	sps.bits(0, 1) // vui_parameters_present_flag
	sps.trailing()

	var pps bitWriter
	pps.ue(0)      // pic_parameter_set_id
	pps.ue(0)      // seq_parameter_set_id
	pps.bits(0, 1) // entropy_coding_mode_flag: CAVLC
	pps.bits(0, 1) // bottom_field_pic_order_in_frame_present_flag
	pps.ue(0)      // num_slice_groups_minus1
	pps.ue(0)      // num_ref_idx_l0_default_active_minus1
	pps.ue(0)      // num_ref_idx_l1_default_active_minus1
	pps.bits(0, 1) // weighted_pred_flag
	pps.bits(0, 2) // weighted_bipred_idc
	pps.se(0)      // pic_init_qp_minus26
	pps.se(0)      // pic_init_qs_minus26
	pps.se(0)      // chroma_qp_index_offset
	pps.bits(1, 1) // deblocking_filter_control_present_flag
	pps.bits(0, 1) // constrained_intra_pred_flag
	pps.bits(0, 1) // redundant_pic_cnt_present_flag
	pps.trailing()

	var idr bitWriter
	idr.ue(0)      // first_mb_in_slice
	idr.ue(7)      // slice_type: I, and every slice of the picture
	idr.ue(0)      // pic_parameter_set_id
	idr.bits(0, 4) // frame_num
	idr.ue(0)      // idr_pic_id
	idr.bits(0, 1) // no_output_of_prior_pics_flag
	idr.bits(0, 1) // long_term_reference_flag
	idr.se(0)      // slice_qp_delta
	idr.ue(1)      // disable_deblocking_filter_idc: off
	for range mbs {
		idr.ue(25) // mb_type I_PCM
		idr.align()
		for range 256 {
			idr.bits(uint(y), 8)
		}
		for range 64 {
			idr.bits(uint(cb), 8)
		}
		for range 64 {
			idr.bits(uint(cr), 8)
		}
	}
	idr.trailing()

	aus := [][]byte{append(append(nal(3, 7, sps.b), nal(3, 8, pps.b)...), nal(3, 5, idr.b)...)}
	for i := 1; i < n; i++ {
		var p bitWriter
		p.ue(0)               // first_mb_in_slice
		p.ue(5)               // slice_type: P, every slice
		p.ue(0)               // pic_parameter_set_id
		p.bits(uint(i%16), 4) // frame_num
		p.bits(0, 1)          // num_ref_idx_active_override_flag
		p.bits(0, 1)          // ref_pic_list_modification_flag_l0
		p.bits(0, 1)          // adaptive_ref_pic_marking_mode_flag
		p.se(0)               // slice_qp_delta
		p.ue(1)               // disable_deblocking_filter_idc
		p.ue(uint(mbs))       // mb_skip_run: all of them
		p.trailing()
		aus = append(aus, nal(2, 1, p.b))
	}
	return aus
}

// nal is one Annex B NAL unit: a start code, the header, and the RBSP
// with emulation prevention bytes.
func nal(refIdc, typ byte, rbsp []byte) []byte {
	out := []byte{0, 0, 0, 1, refIdc<<5 | typ}
	zeros := 0
	for _, b := range rbsp {
		if zeros >= 2 && b <= 3 {
			out = append(out, 3)
			zeros = 0
		}
		out = append(out, b)
		if b == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

// bitWriter writes an RBSP most significant bit first.
type bitWriter struct {
	b []byte
	n uint // bits used in the last byte; 0 means none is open
}

func (w *bitWriter) bit(v uint) {
	if w.n == 0 {
		w.b = append(w.b, 0)
	}
	if v != 0 {
		w.b[len(w.b)-1] |= 0x80 >> w.n
	}
	w.n = (w.n + 1) % 8
}

func (w *bitWriter) bits(v uint, n int) {
	for i := n - 1; i >= 0; i-- {
		w.bit(v >> uint(i) & 1)
	}
}

// ue is unsigned Exp-Golomb.
func (w *bitWriter) ue(v uint) {
	v++
	n := 0
	for x := v; x > 1; x >>= 1 {
		n++
	}
	w.bits(0, n)
	w.bits(v, n+1)
}

// se is signed Exp-Golomb.
func (w *bitWriter) se(v int) {
	if v > 0 {
		w.ue(uint(2*v - 1))
	} else {
		w.ue(uint(-2 * v))
	}
}

func (w *bitWriter) align() {
	for w.n != 0 {
		w.bit(0)
	}
}

func (w *bitWriter) trailing() {
	w.bit(1)
	w.align()
}

func TestPCMH264(t *testing.T) {
	aus := pcmH264(64, 48, color.RGBA{0, 200, 0, 255}, 3)
	if len(aus) != 3 {
		t.Fatalf("%d access units", len(aus))
	}
	// SPS, PPS and IDR in the keyframe; one P slice after.
	var types []byte
	for i := 0; i+4 < len(aus[0]); i++ {
		if aus[0][i] == 0 && aus[0][i+1] == 0 && aus[0][i+2] == 0 && aus[0][i+3] == 1 {
			types = append(types, aus[0][i+4]&0x1f)
		}
	}
	if string(types) != "\x07\x08\x05" || aus[1][4]&0x1f != 1 {
		t.Errorf("NAL types %v, then %d", types, aus[1][4]&0x1f)
	}
	// 12 macroblocks of 384 samples, and their headers.
	if n := len(aus[0]); n < 12*384 || n > 12*384+200 {
		t.Errorf("keyframe of %d bytes", n)
	}
	var w bitWriter
	w.ue(0)
	w.ue(25)
	w.se(-1)
	w.trailing()
	// 1 | 000011010 | 011 | 1, padded: 1000 0110 1001 1100
	if len(w.b) != 2 || w.b[0] != 0x86 || w.b[1] != 0x9c {
		t.Errorf("Exp-Golomb: %08b", w.b)
	}
}
