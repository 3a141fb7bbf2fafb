package api

import "net/http"

func httpClient() *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}
