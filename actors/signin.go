package actors

import "errors"

// signInError returns the sign-in error in err's chain (engine/oauth's
// RequiredError, found by its Fix method so actors need not import it) on
// its own: the transport's wrapping would repeat the URL around the one
// line that names the fix. Other errors come back unchanged.
func signInError(err error) error {
	var s interface {
		error
		Fix() string
	}
	if errors.As(err, &s) {
		return s
	}
	return err
}
