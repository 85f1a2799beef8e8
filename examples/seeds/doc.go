// Package seeds holds the seeds' afloat config: ticket triage over GigaChat Pro, then
// YandexGPT, then T-Lite on a self-hosted vLLM, each tier with its own prompt, and a chat
// route over the same three. Its credentials come from the environment:
//
//	GIGACHAT_AUTH_KEY=… GIGACHAT_CA_FILE=… YANDEX_FOLDER_ID=… YANDEX_API_KEY=… \
//		afloat serve -c examples/seeds/afloat.yaml
//
// The package has no code: its test checks the config as `afloat check` does.
package seeds
