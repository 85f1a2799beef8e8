module github.com/afloat-dev/afloat

go 1.26.8

require (
	github.com/DataDog/sketches-go v1.4.8 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/text v0.42.0 // indirect
)
