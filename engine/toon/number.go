package toon

import (
	"math/big"
	"strconv"
	"strings"
)

// canonicalNumber returns the canonical TOON form (§2) of s, a number in JSON
// syntax, and false when s is not one. Every significant digit of s is kept:
// the value is never rounded through a float. Numbers with 1e-6 ≤ |n| < 1e21
// and zero are plain decimals without exponent, leading zeros, trailing
// fractional zeros or a trailing ".0"; -0 is 0. Other magnitudes use exponent
// form like JavaScript's Number.prototype.toString: one digit before the
// point, a lowercase e and an explicit sign (1e+21, 1.5e-7).
func canonicalNumber(s string) (string, bool) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	if i < len(s) && s[i] == '0' {
		i++
	} else {
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i == intStart {
		return "", false
	}
	intPart := s[intStart:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return "", false
		}
		frac = s[start:i]
	}
	expText := "0"
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start := i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		digitsStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == digitsStart {
			return "", false
		}
		expText = s[start:i]
	}
	if i != len(s) {
		return "", false
	}

	// The value is ±0.digits × 10^point: digits has no leading or trailing
	// zeros, and point is where the decimal point goes relative to digits.
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", true
	}
	trimmed := strings.TrimRight(digits, "0")
	// point = exp + len(intPart) - (leading zeros removed)
	leadingZeros := len(intPart) + len(frac) - len(digits)
	shift := int64(len(intPart) - leadingZeros)
	digits = trimmed

	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	point, small := addExponent(expText, shift)
	if small && point >= -5 && point <= 21 {
		// Plain decimal: 1e-6 ≤ |n| ⇔ point ≥ -5; |n| < 1e21 ⇔ point ≤ 21.
		switch {
		case point <= 0:
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", int(-point)))
			b.WriteString(digits)
		case int(point) < len(digits):
			b.WriteString(digits[:point])
			b.WriteByte('.')
			b.WriteString(digits[point:])
		default:
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", int(point)-len(digits)))
		}
		return b.String(), true
	}
	b.WriteByte(digits[0])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	b.WriteByte('e')
	// The exponent of d.ddd form is point-1.
	var e string
	if small {
		e = strconv.FormatInt(point-1, 10)
	} else {
		e = bigExponent(expText, shift-1)
	}
	if e[0] != '-' {
		b.WriteByte('+')
	}
	b.WriteString(e)
	return b.String(), true
}

// addExponent returns exp+shift when the exponent text is short enough to add
// without overflow; small is false otherwise.
func addExponent(expText string, shift int64) (point int64, small bool) {
	e, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || e > 1<<60 || e < -(1<<60) {
		return 0, false
	}
	return e + shift, true
}

// bigExponent returns exp+shift in decimal for exponents of any length.
func bigExponent(expText string, shift int64) string {
	e, _ := new(big.Int).SetString(strings.TrimPrefix(expText, "+"), 10) // validated by the caller
	return e.Add(e, big.NewInt(shift)).String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
