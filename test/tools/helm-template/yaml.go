package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// toYAML writes a value as Helm's toYaml does (go-yaml v2 through sigs.k8s.io/yaml): keys
// sorted, sequences under a key not indented, strings plain unless YAML would read them as
// something else, then double-quoted (a JSON string is a YAML double-quoted scalar).
func toYAML(v interface{}) string {
	var b strings.Builder
	writeNode(&b, normalize(v), 0)
	return b.String()
}

// normalize turns typed maps and slices (from dict, list, JSON) into the two shapes below.
func normalize(v interface{}) interface{} {
	if v == nil {
		return nil
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Map:
		m := make(map[string]interface{}, r.Len())
		for _, k := range r.MapKeys() {
			m[fmt.Sprint(k.Interface())] = normalize(r.MapIndex(k).Interface())
		}
		return m
	case reflect.Slice, reflect.Array:
		if b, ok := v.([]byte); ok {
			return string(b)
		}
		l := make([]interface{}, r.Len())
		for i := range l {
			l[i] = normalize(r.Index(i).Interface())
		}
		return l
	case reflect.Ptr, reflect.Interface:
		if r.IsNil() {
			return nil
		}
		return normalize(r.Elem().Interface())
	}
	return v
}

func writeNode(b *strings.Builder, v interface{}, depth int) {
	pad := strings.Repeat("  ", depth)
	switch t := v.(type) {
	case map[string]interface{}:
		if len(t) == 0 {
			b.WriteString(pad + "{}\n")
			return
		}
		for _, k := range sortedKeys(t) {
			writeEntry(b, pad+scalar(k)+":", t[k], depth)
		}
	case []interface{}:
		if len(t) == 0 {
			b.WriteString(pad + "[]\n")
			return
		}
		for _, x := range t {
			writeItem(b, pad, x, depth)
		}
	default:
		b.WriteString(pad + scalar(t) + "\n")
	}
}

func writeEntry(b *strings.Builder, head string, v interface{}, depth int) {
	switch t := v.(type) {
	case map[string]interface{}:
		if len(t) == 0 {
			b.WriteString(head + " {}\n")
			return
		}
		b.WriteString(head + "\n")
		writeNode(b, t, depth+1)
	case []interface{}:
		if len(t) == 0 {
			b.WriteString(head + " []\n")
			return
		}
		b.WriteString(head + "\n")
		// go-yaml v2 puts a key's sequence at the key's own indentation.
		writeNode(b, t, depth)
	default:
		b.WriteString(head + " " + scalar(t) + "\n")
	}
}

func writeItem(b *strings.Builder, pad string, v interface{}, depth int) {
	switch t := v.(type) {
	case map[string]interface{}:
		if len(t) == 0 {
			b.WriteString(pad + "- {}\n")
			return
		}
		var inner strings.Builder
		writeNode(&inner, t, depth+1)
		// The first line of the mapping follows the dash; the rest keep their indentation.
		text := inner.String()
		b.WriteString(pad + "- " + strings.TrimPrefix(text, pad+"  "))
	case []interface{}:
		if len(t) == 0 {
			b.WriteString(pad + "- []\n")
			return
		}
		var inner strings.Builder
		writeNode(&inner, t, depth+1)
		b.WriteString(pad + "- " + strings.TrimPrefix(inner.String(), pad+"  "))
	default:
		b.WriteString(pad + "- " + scalar(t) + "\n")
	}
}

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	reserved  = regexp.MustCompile(`^(?i:y|n|yes|no|true|false|on|off|null|~)$`)
	numberish = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^0[xo][0-9a-fA-F_]+$|^[-+]?\.(?i:inf)$|^\.(?i:nan)$|^[0-9]+(:[0-5]?[0-9])+(\.[0-9]*)?$`)
	plainSafe = regexp.MustCompile(`^[^-?:,\[\]{}#&*!|>'"%@` + "`" + `\s][^\n]*$`)
)

func scalar(v interface{}) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	case string:
		if t == "" || reserved.MatchString(t) || numberish.MatchString(t) || !plainSafe.MatchString(t) ||
			strings.Contains(t, ": ") || strings.Contains(t, " #") || strings.HasSuffix(t, ":") ||
			strings.HasSuffix(t, " ") || strings.ContainsAny(t, "\t\r") {
			q, _ := json.Marshal(t)
			return string(q)
		}
		return t
	case float64:
		if t == float64(int64(t)) {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(t), 'g', -1, 32)
	default:
		return fmt.Sprint(t)
	}
}
