//go:build !linux

package main

import "errors"

// pinTo is Linux's only.
func pinTo(int) error { return errors.New("-pin works on Linux only") }
