// Package flags holds the kill switches of shared/DESIGN.md §2 step 1: a global kill, a kill
// per task, a tenant blocklist per task and a rollout percentage per task, read on every call.
//
// A Source serves the document in force; Memory is the in-process one:
//
//	f := flags.NewMemory()
//	_ = f.Set(ctx, &flags.Document{Tasks: map[string]flags.TaskFlags{"triage": {Kill: true}}})
//	doc, _ := f.Flags(ctx)
//	doc.Allow("triage", "acme") // false: the task is killed
package flags
