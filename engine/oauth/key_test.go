package oauth

import "bytes"

// testKey is the bridge key of the package's tests: 32 bytes, the least
// the store seals with.
var testKey = bytes.Repeat([]byte{0x5a}, 32)
