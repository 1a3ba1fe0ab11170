// A gRPC-JSON transcoding proxy (grpc-gateway) in front of memoryd: what the alternative to the
// Connect protocol memoryd serves would cost. Built and run by bench/http_json.py --gateway,
// which generates its handlers into gw/ first (buf.gen.yaml here).
//
//	memoryd-grpc-gateway MEMORYD_ADDRESS   (prints the HTTP address it listens on)
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	// memoryd's refusals carry ErrorInfo and BadRequest details: without their types linked in,
	// the gateway answers every refusal with 500 "failed to marshal error message".
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	memorydv1 "gwbench/gw/memoryd/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: memoryd-grpc-gateway MEMORYD_ADDRESS")
		os.Exit(2)
	}
	ctx := context.Background()
	mux := runtime.NewServeMux()
	options := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	register := []func(context.Context, *runtime.ServeMux, string, []grpc.DialOption) error{
		memorydv1.RegisterMemoryServiceHandlerFromEndpoint,
		memorydv1.RegisterCompactionServiceHandlerFromEndpoint,
	}
	for _, add := range register {
		if err := add(ctx, mux, os.Args[1], options); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(listener.Addr().String())
	fmt.Fprintln(os.Stderr, http.Serve(listener, mux))
	os.Exit(1)
}
