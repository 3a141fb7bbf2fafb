package engine

import "github.com/rewind-io/rewind/engine/internal/auth"

// AuthFailureConfig limits failed authentications by source
// (Config.Auth.Failures); its fields and their defaults are documented on
// the type it names.
type AuthFailureConfig = auth.FailureConfig
