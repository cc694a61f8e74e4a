module fastshake/interop/pion13

go 1.24.0

require (
	github.com/pion/dtls/v4 v4.0.1
	github.com/pion/logging v0.2.4
)

require (
	github.com/pion/transport/v5 v5.1.4 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
