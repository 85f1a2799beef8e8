package prompt

import "strings"

// Version returns the version a template's file name carries: the "vN" (N decimal digits)
// before ".tmpl", as the whole base name or its last dot-separated part. The rest of the path
// is free: "triage/gigachat-pro.v3.tmpl" and "v3.tmpl" are "v3"; "x.tmpl", "x-v3.tmpl" and
// "x.v3.txt" carry none and give "".
func Version(name string) string {
	base := name[strings.LastIndexAny(name, `/\`)+1:]
	stem, ok := strings.CutSuffix(base, ".tmpl")
	if !ok {
		return ""
	}
	v := stem[strings.LastIndexByte(stem, '.')+1:]
	if len(v) < 2 || v[0] != 'v' {
		return ""
	}
	for _, c := range v[1:] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return v
}
