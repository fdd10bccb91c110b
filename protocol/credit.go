package protocol

// Link credit: on a link whose transport buffers a lot between the host
// and the sandbox's stdin (a Kubernetes attach: the API server, the kubelet
// and the container runtime each hold some), a host write completes long
// before the sandbox has read it, so a write deadline alone cannot tell that
// the sandbox stopped reading. Such a link asks the sandbox, in its boot
// frame (Limits.LinkWindow), to acknowledge what it has read: the host then
// never has more than the window written and unacknowledged, and a sandbox
// that stops reading stops the host's writes within one window, where the
// write deadline sees it.

// MethodAck is the sandbox's acknowledgement notification (AckParams): it
// has read Bytes bytes of the link in all, counted from the first byte
// after the boot frame. Acks are cumulative; the host ignores one below an
// earlier ack and caps one above what it has written, so a forged ack can
// only let the host fill the transport's buffers (outside its own memory),
// until its writes block there and meet the same deadline.
const MethodAck = "ack"

// AckParams are the params of an ack notification.
type AckParams struct {
	Bytes int64 `json:"bytes"`
}
