package main

import (
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/afloat-dev/afloat"
	"github.com/afloat-dev/afloat/cascade"
	"github.com/afloat-dev/afloat/prompt"
	"github.com/jonboulle/clockwork"
)

//go:embed triage.schema.json
var triageSchema []byte

//go:embed prompts/triage.primary.v1.tmpl
var triagePrompt string

// Triage is the model's answer, and the heuristic's: the same type on every path.
type Triage struct {
	Department   *string `json:"department"`
	IsUrgent     float64 `json:"is_urgent"`
	UrgencyScore float64 `json:"urgency_score"`
}

// Evaluation is a ticket's triage with where it came from.
type Evaluation struct {
	Department   *string       `json:"department"`
	IsUrgent     float64       `json:"is_urgent"`
	UrgencyScore float64       `json:"urgency_score"`
	Source       afloat.Source `json:"source"`
	Degraded     bool          `json:"degraded"`
	Reason       afloat.Reason `json:"reason,omitempty"`
}

// Ticket is a stored support ticket.
type Ticket struct {
	ID         string     `json:"id"`
	Subject    string     `json:"subject"`
	Message    string     `json:"message"`
	CreatedAt  time.Time  `json:"created_at"`
	Evaluation Evaluation `json:"evaluation"`
}

// triageRules answer when no model does (DESIGN.md §4's example rules).
var triageRules = cascade.Rules{
	{Default: map[string]any{"is_urgent": 0.2, "urgency_score": 0.5, "department": nil}},
	{WhenAny: []string{"fora do ar", "urgente", "parou", "bloqueado", "не работает", "срочно", "down", "urgent"},
		Set: map[string]any{"is_urgent": 0.8, "urgency_score": 2.0}},
	{WhenAny: []string{"erro", "ошибка", "error"}, Set: map[string]any{"department": "technical"}},
	{WhenAny: []string{"fatura", "boleto", "счёт", "счет", "оплат", "invoice", "refund"}, Set: map[string]any{"department": "billing"}},
}

// Config configures the service.
type Config struct {
	// Providers are the triage cascade's tiers, in order; at least one.
	Providers []cascade.ProviderConfig
	// Budget is the triage task's total budget per ticket. 0 means 1.5s.
	Budget time.Duration
	// Workers caps the requests served at once, as the seeds' server's thread pool did;
	// requests beyond it wait for a worker. 0 means 16.
	Workers int
	// Engine is passed to cascade.New with Providers set from above; its zero value is
	// fine.
	Engine cascade.Config
	// Logger logs requests that fail; nil discards.
	Logger *slog.Logger
}

// Service is the ticket service. It is safe for concurrent use.
type Service struct {
	engine  *cascade.Engine
	triage  *cascade.Task
	clock   clockwork.Clock
	log     *slog.Logger
	workers chan struct{}

	mu      sync.RWMutex
	tickets map[string]*Ticket
	seq     atomic.Int64
}

// NewService builds the service and its triage task.
func NewService(cfg Config) (*Service, error) {
	if len(cfg.Providers) == 0 {
		return nil, errors.New("tickets: no providers")
	}
	if cfg.Budget == 0 {
		cfg.Budget = 1500 * time.Millisecond
	}
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ec := cfg.Engine
	ec.Providers = cfg.Providers
	if ec.Logger == nil {
		ec.Logger = cfg.Logger
	}
	if ec.Clock == nil {
		ec.Clock = clockwork.NewRealClock()
	}
	engine, err := cascade.New(ec)
	if err != nil {
		return nil, err
	}
	tc := cascade.TaskConfig{
		Name: "triage", Criticality: afloat.Enrichment, Budget: cfg.Budget,
		Schema: triageSchema, Heuristic: triageRules,
	}
	for _, p := range cfg.Providers {
		tmpl, err := prompt.Parse("prompts/triage."+p.Name+".v1.tmpl", triagePrompt)
		if err != nil {
			return nil, err
		}
		tc.Cascade = append(tc.Cascade, cascade.Tier{Provider: p.Name, Prompt: tmpl})
	}
	triage, err := engine.Task(tc)
	if err != nil {
		return nil, err
	}
	return &Service{
		engine: engine, triage: triage, clock: ec.Clock, log: cfg.Logger,
		workers: make(chan struct{}, cfg.Workers), tickets: map[string]*Ticket{},
	}, nil
}

// Engine returns the afloat engine, for its breakers and metrics.
func (s *Service) Engine() *cascade.Engine { return s.engine }

// Handler serves POST /tickets and GET /tickets/{id}.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", s.create)
	mux.HandleFunc("GET /tickets/{id}", s.get)
	return s.limit(mux)
}

// limit serves at most cap(workers) requests at once, like a fixed thread pool: the others
// wait for a worker, or give up when their client does.
func (s *Service) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.workers <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-s.workers }()
		next.ServeHTTP(w, r)
	})
}

type createRequest struct {
	Subject string `json:"subject"`
	Message string `json:"message"`
}

func (s *Service) create(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "body must be application/json")
		return
	}
	var req createRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Subject) == "" && strings.TrimSpace(req.Message) == "" {
		writeError(w, http.StatusBadRequest, "subject or message is required")
		return
	}
	res, err := afloat.Run[Triage](r.Context(), s.triage, afloat.Input{"subject": req.Subject, "message": req.Message})
	if err != nil && r.Context().Err() != nil {
		return // the client left
	}
	if err != nil {
		// An enrichment task answers on every path; an error here is a bug, not an outage.
		s.log.Error("triage failed", "err", err)
		writeError(w, http.StatusInternalServerError, "triage failed")
		return
	}
	t := &Ticket{
		ID: strconv.FormatInt(s.seq.Add(1), 10), Subject: req.Subject, Message: req.Message,
		CreatedAt: s.clock.Now().UTC(),
		Evaluation: Evaluation{
			Department: res.Value.Department, IsUrgent: res.Value.IsUrgent, UrgencyScore: res.Value.UrgencyScore,
			Source: res.Source, Degraded: res.Degraded, Reason: res.Reason,
		},
	}
	s.mu.Lock()
	s.tickets[t.ID] = t
	s.mu.Unlock()
	w.Header().Set("Location", "/tickets/"+t.ID)
	writeJSON(w, http.StatusCreated, t)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	t, ok := s.tickets[r.PathValue("id")]
	s.mu.RUnlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such ticket")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	code := strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
