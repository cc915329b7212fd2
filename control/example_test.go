package control_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/seed32e55400/retries/control"
	"github.com/seed32e55400/retries/control/controltest"
)

// Deploy a package once and wait until it serves. The config server here
// is the stand-in of package controltest, in process, whose answer to the
// POST is lost after it committed the package: the deployment's
// generation is read and adopted, with no second POST.
func Example() {
	s := &controltest.Server{
		Services: []controltest.Service{
			{Type: "container", Cluster: "default", Host: "c1.example", Port: 8080, Lag: 50 * time.Millisecond},
			{Type: "searchnode", Cluster: "music", Host: "n1.example", Port: 19107},
		},
		Posts: []controltest.Fault{controltest.LostAfterCommit},
	}
	s.Deployed(7)

	var pkg bytes.Buffer
	z := zip.NewWriter(&pkg)
	f, _ := z.Create("services.xml")
	fmt.Fprint(f, `<services version="1.0"/>`)
	z.Close()

	c, err := control.New(control.Config{URL: s.URL(), Transport: s.Transport()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := c.Deploy(ctx, pkg.Bytes())
	if err != nil {
		panic(err)
	}
	fmt.Printf("generation %d after %d, %d POST, adopted %v\n", d.Generation, d.Previous, d.Posts, d.Adopted)
	st, err := c.Wait(ctx, d.Generation, d.Restart)
	fmt.Println(err, len(st.Behind()), st.Services[0].Health)
	// Output:
	// generation 8 after 7, 1 POST, adopted true
	// <nil> 0 up
}
