package ec2sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// AdminHandler is the simulator's own control API, JSON over HTTP:
//
//	GET    /state                 the whole state (Snapshot)
//	GET    /counters              calls, throttles and errors per action
//	GET    /instances             instances
//	POST   /instances             {"type","subnetId","securityGroups","id"} -> instance (+ "imdsUrl")
//	DELETE /instances/{id}        terminate (DeleteOnTermination honoured)
//	POST   /vpcs                  {"id","cidr"}
//	POST   /vpcs/{id}/cidr-blocks {"cidr"} -> {"associationId"}
//	POST   /vpcs/{id}/ipv6-cidr-blocks {"cidr"} (empty: Amazon-provided) -> {"associationId"}
//	POST   /subnets               {"id","vpcId","cidr","az","tags","ipv6Cidr"}
//	POST   /subnets/{id}/exhaust  {"keepFree"} -> {"taken"}: its free addresses taken
//	POST   /subnets/{id}/refill   -> {"released"}: what exhaust took given back
//	POST   /security-groups       {"id","vpcId","name","description","tags","rules"} -> {"id"} (no rules: all traffic)
//	POST   /tags/{id}             {"key": "value", ...} on a VPC, subnet, group, instance or ENI
//	GET    /faults                the configured faults
//	POST   /faults/script         {"action","code","n"}
//	POST   /faults/probability    {"action","code","p"}
//	POST   /faults/latency        {"action","ms"}
//	POST   /faults/drop           {"action","n"}
//	POST   /faults/visibility     {"ms"}
//	POST   /faults/imds-lag       {"ms"}
//	POST   /faults/unassign-lag   {"ms"}
//	POST   /faults/reset
//	POST   /throttling            {"enabled", "buckets": {"Action": {"capacity","refillPerSec"}}}
//	POST   /delays                {"attachMs","detachMs"}
func (s *Sim) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Snapshot()) })
	mux.HandleFunc("GET /counters", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Counters()) })
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.faults.State()) })
	mux.HandleFunc("GET /instances", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Instances()) })
	mux.HandleFunc("POST /instances", func(w http.ResponseWriter, r *http.Request) {
		var spec InstanceSpec
		if !readJSON(w, r, &spec) {
			return
		}
		inst, err := s.AddInstance(spec)
		if err != nil {
			writeErr(w, err)
			return
		}
		out := struct {
			Instance
			IMDSURL string `json:"imdsUrl,omitempty"`
		}{Instance: inst}
		s.mu.Lock()
		urlFn := s.imdsURL
		s.mu.Unlock()
		if urlFn != nil {
			out.IMDSURL = urlFn(inst.ID)
		}
		writeJSON(w, http.StatusCreated, out)
	})
	mux.HandleFunc("DELETE /instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.TerminateInstance(r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"terminated": r.PathValue("id")})
	})
	mux.HandleFunc("POST /vpcs", func(w http.ResponseWriter, r *http.Request) {
		var v struct{ ID, CIDR string }
		if readJSON(w, r, &v) {
			replyErr(w, s.AddVPC(v.ID, v.CIDR), v)
		}
	})
	mux.HandleFunc("POST /subnets", func(w http.ResponseWriter, r *http.Request) {
		var v SubnetSpec
		if readJSON(w, r, &v) {
			replyErr(w, s.AddSubnet(v), v)
		}
	})
	mux.HandleFunc("POST /vpcs/{id}/cidr-blocks", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			CIDR string `json:"cidr"`
		}
		if readJSON(w, r, &v) {
			assoc, err := s.AddVPCCIDRBlock(r.PathValue("id"), v.CIDR)
			replyErr(w, err, map[string]string{"associationId": assoc})
		}
	})
	mux.HandleFunc("POST /vpcs/{id}/ipv6-cidr-blocks", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			CIDR string `json:"cidr"`
		}
		if readJSON(w, r, &v) {
			assoc, err := s.AddVPCIPv6Block(r.PathValue("id"), v.CIDR)
			replyErr(w, err, map[string]string{"associationId": assoc})
		}
	})
	mux.HandleFunc("POST /subnets/{id}/exhaust", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			KeepFree int `json:"keepFree"`
		}
		if r.ContentLength != 0 && !readJSON(w, r, &v) {
			return
		}
		n, err := s.ExhaustSubnet(r.PathValue("id"), v.KeepFree)
		replyErr(w, err, map[string]int{"taken": n})
	})
	mux.HandleFunc("POST /subnets/{id}/refill", func(w http.ResponseWriter, r *http.Request) {
		n, err := s.RefillSubnet(r.PathValue("id"))
		replyErr(w, err, map[string]int{"released": n})
	})
	mux.HandleFunc("POST /security-groups", func(w http.ResponseWriter, r *http.Request) {
		var v SecurityGroupSpec
		if readJSON(w, r, &v) {
			id, err := s.AddSecurityGroup(v)
			replyErr(w, err, map[string]string{"id": id})
		}
	})
	mux.HandleFunc("POST /tags/{id}", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]string
		if readJSON(w, r, &v) {
			replyErr(w, s.SetTags(r.PathValue("id"), v), v)
		}
	})
	type fault struct {
		Action string  `json:"action"`
		Code   string  `json:"code"`
		N      int     `json:"n"`
		P      float64 `json:"p"`
		MS     float64 `json:"ms"`
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	faultRoute := func(path string, apply func(fault) error) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var f fault
			if r.ContentLength != 0 && !readJSON(w, r, &f) {
				return
			}
			replyErr(w, apply(f), s.faults.State())
		})
	}
	needAction := func(f fault) error {
		if f.Action == "" {
			return errors.New("action is required (\"*\" for every action)")
		}
		return nil
	}
	faultRoute("/faults/script", func(f fault) error {
		if err := needAction(f); err != nil || f.Code == "" || f.N < 1 {
			return errors.Join(err, errors.New("action, code and n >= 1 are required"))
		}
		s.faults.Script(f.Action, f.Code, f.N)
		return nil
	})
	faultRoute("/faults/probability", func(f fault) error {
		if err := needAction(f); err != nil || f.Code == "" || f.P < 0 || f.P > 1 {
			return errors.Join(err, errors.New("action, code and 0 <= p <= 1 are required"))
		}
		s.faults.SetProbability(f.Action, f.Code, f.P)
		return nil
	})
	faultRoute("/faults/latency", func(f fault) error {
		if err := needAction(f); err != nil {
			return err
		}
		s.faults.SetLatency(f.Action, ms(f.MS))
		return nil
	})
	faultRoute("/faults/drop", func(f fault) error {
		if err := needAction(f); err != nil || f.N < 1 {
			return errors.Join(err, errors.New("action and n >= 1 are required"))
		}
		s.faults.DropResponses(f.Action, f.N)
		return nil
	})
	faultRoute("/faults/visibility", func(f fault) error { s.faults.SetVisibilityDelay(ms(f.MS)); return nil })
	faultRoute("/faults/imds-lag", func(f fault) error { s.faults.SetIMDSLag(ms(f.MS)); return nil })
	faultRoute("/faults/unassign-lag", func(f fault) error { s.faults.SetUnassignLag(ms(f.MS)); return nil })
	faultRoute("/faults/reset", func(fault) error { s.faults.Reset(); return nil })
	mux.HandleFunc("POST /throttling", func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			Enabled *bool                 `json:"enabled"`
			Buckets map[string]BucketSpec `json:"buckets"`
		}
		if !readJSON(w, r, &v) {
			return
		}
		if v.Enabled != nil {
			s.SetThrottling(*v.Enabled)
		}
		for k, b := range v.Buckets {
			s.SetBucket(k, b)
		}
		s.mu.Lock()
		on := s.cfg.Throttling
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]bool{"enabled": on})
	})
	mux.HandleFunc("POST /delays", func(w http.ResponseWriter, r *http.Request) {
		var v struct{ AttachMS, DetachMS float64 }
		if readJSON(w, r, &v) {
			s.SetDelays(ms(v.AttachMS), ms(v.DetachMS))
			writeJSON(w, http.StatusOK, v)
		}
	})
	return mux
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decoding request: " + err.Error()})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrExists):
		status = http.StatusConflict
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func replyErr(w http.ResponseWriter, err error, ok any) {
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ok)
}
