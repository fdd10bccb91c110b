package engine

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// eventLog logs supervisor events by kind (as syncthing's svcutil does): a
// panic is an error with its stack, a failure a warning, a stop timeout a
// warning, backoff and resume are info. A failure repeating the previous
// one (same service, same error) goes to debug with its count, so a
// crash-looping actor does not flood the log. Owned by logEvents.
type eventLog struct {
	log     zerolog.Logger
	last    string // service and error of the previous failure
	repeats int
}

func (l *eventLog) event(ev suture.Event) {
	switch e := ev.(type) {
	case suture.EventServicePanic:
		l.last, l.repeats = "", 0
		l.log.Error().Str("supervisor", e.SupervisorName).Str("service", e.ServiceName).Bool("restarting", e.Restarting).
			Str("stack", e.Stacktrace).Msgf("actor panicked: %s", e.PanicMsg)
	case suture.EventServiceTerminate:
		key := e.ServiceName + "\x00" + fmt.Sprint(e.Err)
		if key == l.last {
			l.repeats++
			l.log.Debug().Str("supervisor", e.SupervisorName).Str("service", e.ServiceName).Int("repeats", l.repeats).
				Bool("restarting", e.Restarting).Msgf("actor failed again: %v", e.Err)
			return
		}
		l.last, l.repeats = key, 0
		l.log.Warn().Str("supervisor", e.SupervisorName).Str("service", e.ServiceName).Float64("failures", e.CurrentFailures).
			Bool("restarting", e.Restarting).Msgf("actor failed: %v", e.Err)
	case suture.EventStopTimeout:
		l.log.Warn().Str("supervisor", e.SupervisorName).Str("service", e.ServiceName).Msg("actor did not stop in time")
	case suture.EventBackoff:
		l.log.Info().Str("supervisor", e.SupervisorName).Msg("too many failures; supervisor backing off")
	case suture.EventResume:
		l.log.Info().Str("supervisor", e.SupervisorName).Msg("supervisor resumed after its backoff")
	default:
		l.log.Warn().Msg(ev.String())
	}
}
